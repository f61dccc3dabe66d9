"""Policies and what they are made of: the LLM policy (its sampling and its scoring), the MLP
policy of numeric environments, critics' value heads, the prompt budget, and model loading.
Nothing here knows a learner: a policy samples and scores, a learner decides what to do with it."""
