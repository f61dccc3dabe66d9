"""The code tasks: CoopHumanEval, HumanEval and MBPP, a helper writer and a main writer whose
merged program runs the benchmark's tests in the sandbox."""
