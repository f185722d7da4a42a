"""The vector stores API (`/v1/vector_stores`) and the search behind the Responses API's `file_search` tool."""
