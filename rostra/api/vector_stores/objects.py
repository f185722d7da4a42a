"""What the vector stores API answers besides the stored objects (rostra/store/vector_objects.py): pages, deletions,
search results and a file's content, typed until the route serializes them (`wire()`), as OpenAI's spec shapes
them (ListVectorStoresResponse, DeleteVectorStoreResponse, VectorStoreSearchResultsPage,
VectorStoreFileContentResponse)."""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from rostra.api.vector_stores.index import Hit
from rostra.store.vector_objects import Attributes, VectorStore, VectorStoreFile, WireModel

Item = TypeVar("Item", VectorStore, VectorStoreFile)


class Page(WireModel, Generic[Item]):
    data: list[Item]
    has_more: bool

    def wire(self) -> dict[str, Any]:
        data = [item.wire() for item in self.data]
        return {"object": "list", "data": data, "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None, "has_more": self.has_more}


class Deleted(WireModel):
    id: str
    object: Literal["vector_store.deleted", "vector_store.file.deleted"]
    deleted: bool = True


class TextContent(WireModel):
    type: Literal["text"] = "text"
    text: str


class FileContentPage(WireModel):
    object: Literal["vector_store.file_content.page"] = "vector_store.file_content.page"
    data: list[TextContent]
    has_more: bool = False
    next_page: None = None


class SearchResult(WireModel):
    """A hit as a search results page shows it (VectorStoreSearchResultItem)."""

    file_id: str
    filename: str
    score: float
    attributes: Attributes | None
    content: list[TextContent]

    @classmethod
    def of(cls, hit: Hit) -> SearchResult:
        row = hit.row
        return cls(file_id=row.file_id, filename=row.filename, score=round(hit.score, 6), attributes=row.attributes,
                   content=[TextContent(text=row.text)])


class SearchResultsPage(WireModel):
    object: Literal["vector_store.search_results.page"] = "vector_store.search_results.page"
    search_query: list[str]
    data: list[SearchResult]
    has_more: bool = False
    next_page: None = None
