"""The building games' pure scoring: an answer's commands in, a score with named parts out."""
