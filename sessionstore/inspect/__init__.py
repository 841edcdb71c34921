"""Reading a session for people and tools: the best trial, the view model, sparklines."""
