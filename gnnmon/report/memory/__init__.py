"""A run's memory model: peak bytes fitted on batch shapes (:mod:`.model`, with its least squares
and extrapolation checks), and the out-of-memory post-mortem that reads it (:mod:`.oom`)."""
