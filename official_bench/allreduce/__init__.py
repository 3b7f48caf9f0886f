"""All-reduce: the bandwidth benchmark, the collectives a step issues, their
cost inside a step, and the scaling model the extractor predicts with."""
