"""The RTL testbench: bus, ports, memory and core models, scoreboard, run loop, simulator runners."""
