"""`/v1/vector_stores`, its files, file batches and search. Each call acts as the tenant of its API key."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from rostra.api.vector_stores.requests import (
    CreateBatchBody,
    CreateFileBody,
    CreateStoreBody,
    SearchBody,
    UpdateFileBody,
    UpdateStoreBody,
)
from rostra.api.vector_stores.service import VectorStoresService
from rostra.errors import ServiceUnavailable
from rostra.http.caller import tenant_of
from rostra.http.generation_endpoint import json_response
from rostra.http.request_body import check_page, parse_body
from rostra.store.vector_objects import WireModel

router = APIRouter()
STORES = "/v1/vector_stores"


def service(request: Request) -> VectorStoresService:
    found = getattr(request.app.state, "vector_stores", None)
    if not isinstance(found, VectorStoresService):
        raise ServiceUnavailable("this server keeps no vector stores")
    return found


def answer(result: WireModel) -> Response:
    """The service's typed answer, serialized here, at the wire."""
    return json_response(result.wire())


@router.post(STORES)
async def create_store(request: Request) -> Response:
    body = await parse_body(request, CreateStoreBody)
    return answer(await service(request).create_store(body, tenant_of(request)))


@router.get(STORES)
async def list_stores(request: Request, after: str | None = None, limit: int = 20,
                      order: str = "desc") -> Response:
    check_page(limit, order)
    return answer(await service(request).list_stores(after, limit, order, tenant_of(request)))


@router.get(STORES + "/{store_id}")
async def retrieve_store(request: Request, store_id: str) -> Response:
    vector_stores = service(request)
    return answer(await vector_stores.live(await vector_stores.get_store(store_id, tenant_of(request))))


@router.post(STORES + "/{store_id}")
async def update_store(request: Request, store_id: str) -> Response:
    body = await parse_body(request, UpdateStoreBody)
    return answer(await service(request).update_store(store_id, body, tenant_of(request)))


@router.delete(STORES + "/{store_id}")
async def delete_store(request: Request, store_id: str) -> Response:
    return answer(await service(request).delete_store(store_id, tenant_of(request)))


@router.post(STORES + "/{store_id}/search")
async def search(request: Request, store_id: str) -> Response:
    body = await parse_body(request, SearchBody)
    return answer(await service(request).search(store_id, body, tenant_of(request)))


@router.post(STORES + "/{store_id}/files")
async def add_file(request: Request, store_id: str) -> Response:
    body = await parse_body(request, CreateFileBody)
    return answer(await service(request).add_file(store_id, body, tenant_of(request)))


@router.get(STORES + "/{store_id}/files")
async def list_files(request: Request, store_id: str, after: str | None = None, limit: int = 20,
                     order: str = "desc", filter: str | None = None) -> Response:
    check_page(limit, order)
    return answer(await service(request).list_files(store_id, after, limit, order, filter, tenant_of(request)))


@router.get(STORES + "/{store_id}/files/{file_id}")
async def retrieve_file(request: Request, store_id: str, file_id: str) -> Response:
    return answer(await service(request).get_file(store_id, file_id, tenant_of(request)))


@router.post(STORES + "/{store_id}/files/{file_id}")
async def update_file(request: Request, store_id: str, file_id: str) -> Response:
    body = await parse_body(request, UpdateFileBody)
    return answer(await service(request).update_file(store_id, file_id, body.attributes, tenant_of(request)))


@router.delete(STORES + "/{store_id}/files/{file_id}")
async def delete_file(request: Request, store_id: str, file_id: str) -> Response:
    return answer(await service(request).delete_file(store_id, file_id, tenant_of(request)))


@router.get(STORES + "/{store_id}/files/{file_id}/content")
async def file_content(request: Request, store_id: str, file_id: str) -> Response:
    return answer(await service(request).file_content(store_id, file_id, tenant_of(request)))


@router.post(STORES + "/{store_id}/file_batches")
async def create_batch(request: Request, store_id: str) -> Response:
    body = await parse_body(request, CreateBatchBody)
    return answer(await service(request).create_batch(store_id, body, tenant_of(request)))


@router.get(STORES + "/{store_id}/file_batches/{batch_id}")
async def retrieve_batch(request: Request, store_id: str, batch_id: str) -> Response:
    return answer(await service(request).get_batch(store_id, batch_id, tenant_of(request)))


@router.post(STORES + "/{store_id}/file_batches/{batch_id}/cancel")
async def cancel_batch(request: Request, store_id: str, batch_id: str) -> Response:
    return answer(await service(request).cancel_batch(store_id, batch_id, tenant_of(request)))


@router.get(STORES + "/{store_id}/file_batches/{batch_id}/files")
async def batch_files(request: Request, store_id: str, batch_id: str, after: str | None = None, limit: int = 20,
                      order: str = "desc", filter: str | None = None) -> Response:
    check_page(limit, order)
    vector_stores = service(request)
    await vector_stores.get_batch(store_id, batch_id, tenant_of(request))
    return answer(await vector_stores.list_files(store_id, after, limit, order, filter, tenant_of(request), batch_id))
