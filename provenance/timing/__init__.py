"""Where the time goes: per-op profiles, their roll-up rule, spreads of samples, wait counters."""
