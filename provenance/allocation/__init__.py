"""Where the memory goes: the static memory timeline and its roll-up, the measured checks."""
