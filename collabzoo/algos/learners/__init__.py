"""The learners and the two training loops they share: the Monte-Carlo tree learner
(MA-REINFORCE, MAGRPO) and the actor-critic learner (IAC, IPPO, CC), on the `Learner` base;
and the supervised warm start. Their public names are exported by `collabzoo.algos`."""
