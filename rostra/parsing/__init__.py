"""Engine tokens -> semantic events: decoder (bytes -> text, stop conditions), then the output
parsers (reasoning, then tools). All of it is IO-free and per choice."""
