"""Private filesystem recipes: the one atomic-file and atomic-directory recipe, safe reads."""
