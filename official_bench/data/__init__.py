"""Input pipelines: one builder per source behind `data.factory`."""
