"""MkDocs hooks: the pages of deca.docs.GENERATED_PAGES (the CLI reference from the argparse
parsers, ARCHITECTURE.md), made when the site is built, so they cannot disagree with their source."""

from mkdocs.structure.files import File


def on_files(files, config):
    from deca.docs import GENERATED_PAGES

    for name, make in GENERATED_PAGES.items():
        files.append(File.generated(config, name, content=make()))
    return files
