"""The paper's analytic performance model (Roof-Surface, bubbles, engines, W x L exploration); simulates nothing."""
