"""The writing tasks: TLDR (two summaries of a Reddit post) and arXiv (an introduction
expanded from an abstract), scored by length ratios and word overlap."""
