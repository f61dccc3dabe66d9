"""TravelPlanner: two agents fill one itinerary's slots (agent 0 the city, transport and lodging,
agent 1 the meals and attractions); a deterministic merger builds the plan, scored against the
query's reference information (H=1)."""
