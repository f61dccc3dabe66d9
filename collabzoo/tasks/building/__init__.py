"""The building games: StrBuild (a word drawn in blocks on a 2-D wall) and HouseBuild (a 3-D
house raised under block caps while spiders attack)."""
