"""kprof: the profiler (sessions, scopes, CUPTI backends, hatchet output) and its viewer."""
