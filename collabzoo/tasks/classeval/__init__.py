"""ClassEval: two programmers complete one Python class, its methods split between them by
parameter count; the merged class runs the benchmark's unittest suites in the sandbox."""
