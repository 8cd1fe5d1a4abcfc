"""ThunderFX as capture records it (graphs.py: Dynamo graphs, pieces, split reasons, graph breaks) and as the
report reads torch's structured trace back (torch_trace.py). No torch import: plain values."""
