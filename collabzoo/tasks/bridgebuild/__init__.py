"""BridgeBuild: two workers under fog of war probe pillars, message each other and fill water
cells to link a start anchor to a target anchor on a 2-D map, avoiding the fake pillars."""
