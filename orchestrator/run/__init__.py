"""One sweep: dispatch the planned cells (here, on Ray, or on a provider's nodes), keep the
budget, journal each result."""
