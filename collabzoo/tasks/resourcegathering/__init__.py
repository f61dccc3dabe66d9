"""ResourceGathering: a wood worker and a stone-and-iron worker gather a team goal on a grid
map under fog of war, each seeing mostly what the other needs, and tell each other where it is."""
