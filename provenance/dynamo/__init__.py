"""ThunderFX as capture records it: Dynamo graphs, pieces, split reasons, graph breaks."""
