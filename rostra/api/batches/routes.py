"""`/v1/files` and `/v1/batches`. Each call acts as the tenant of its API key (a file or batch of another key is a
404), as the Responses API does."""

from __future__ import annotations

from typing import Any

from collections.abc import AsyncIterator

from fastapi import APIRouter, Request
from pydantic import BaseModel
from starlette.datastructures import FormData, UploadFile
from starlette.responses import JSONResponse, Response, StreamingResponse

from rostra.api.batches.objects import BatchList
from rostra.api.batches.service import BatchesService, CreateBatchBody, ExpiresAfter
from rostra.errors import InvalidRequest, ServiceUnavailable
from rostra.http.caller import tenant_of
from rostra.http.request_body import check_page, parse_body
from rostra.store.batch_objects import Batch

router = APIRouter()
UPLOAD_CHUNK = 1024 * 1024


def service(request: Request) -> BatchesService:
    batches = getattr(request.app.state, "batches", None)
    if not isinstance(batches, BatchesService):
        raise ServiceUnavailable("this server keeps no files or batches")
    return batches


@router.post("/v1/files")
async def upload_file(request: Request) -> Response:
    files = service(request)
    # The file part is spooled to a temporary file by the form parser (on disk past 1 MiB), then copied in chunks.
    form = await request.form(max_files=1, max_fields=8)
    try:
        upload, purpose = form.get("file"), form.get("purpose")
        if not isinstance(upload, UploadFile):
            raise InvalidRequest("file: a file part is required (multipart/form-data)", param="file")
        if not isinstance(purpose, str):
            raise InvalidRequest("purpose is required", param="purpose")
        return present(await files.upload(upload.filename or "upload", purpose, _chunks(upload), tenant_of(request),
                                          _expires_after(form)))
    finally:
        await form.close()


def _expires_after(form: FormData) -> ExpiresAfter | None:
    """`expires_after[anchor]` and `expires_after[seconds]`, as the SDKs send a nested form field."""
    anchor, seconds = form.get("expires_after[anchor]"), form.get("expires_after[seconds]")
    if anchor is None and seconds is None:
        return None
    if anchor != "created_at":
        raise InvalidRequest("expires_after.anchor must be 'created_at'", param="expires_after.anchor")
    if not isinstance(seconds, str) or not seconds.strip().isdigit():
        raise InvalidRequest("expires_after.seconds must be a whole number of seconds", param="expires_after.seconds")
    return ExpiresAfter(anchor="created_at", seconds=int(seconds))


def present(value: BaseModel) -> JSONResponse:
    """The object as the wire shows it: without its unset (null) fields, as the spec types them (a string or absent;
    the SDKs read an absent field as None), in lists too; without what only the server keeps (WIRE_HIDDEN)."""
    return JSONResponse(value.model_dump(mode="json", exclude_none=True, exclude=WIRE_HIDDEN.get(type(value))))


# Fields a stored object keeps that OpenAI's object has not (a batch's output_expires_after), by its type.
WIRE_HIDDEN: dict[type[BaseModel], Any] = {Batch: set(Batch.HIDDEN), BatchList: {"data": {"__all__": set(Batch.HIDDEN)}}}


async def _chunks(upload: UploadFile) -> AsyncIterator[bytes]:
    while chunk := await upload.read(UPLOAD_CHUNK):
        yield chunk


@router.get("/v1/files")
async def list_files(request: Request, after: str | None = None, limit: int = 100, order: str = "desc",
                     purpose: str | None = None) -> Response:
    if not 1 <= limit <= 10000:
        raise InvalidRequest("limit must be between 1 and 10000", param="limit")
    check_page(1, order)
    return present(await service(request).list_files(after, limit, order, purpose, tenant_of(request)))


@router.get("/v1/files/{file_id}")
async def retrieve_file(request: Request, file_id: str) -> Response:
    return present(await service(request).get_file(file_id, tenant_of(request)))


@router.get("/v1/files/{file_id}/content")
async def file_content(request: Request, file_id: str) -> Response:
    files = service(request)
    file = await files.get_file(file_id, tenant_of(request))
    return StreamingResponse(await files.content(file_id, tenant_of(request)), media_type="application/octet-stream",
                             headers={"content-length": str(file.bytes)})


@router.delete("/v1/files/{file_id}")
async def delete_file(request: Request, file_id: str) -> Response:
    return present(await service(request).delete_file(file_id, tenant_of(request)))


@router.post("/v1/batches")
async def create_batch(request: Request) -> Response:
    body = await parse_body(request, CreateBatchBody)
    return present(await service(request).create_batch(body, tenant_of(request)))


@router.get("/v1/batches")
async def list_batches(request: Request, after: str | None = None, limit: int = 20) -> Response:
    check_page(limit, "desc")
    return present(await service(request).list_batches(after, limit, tenant_of(request)))


@router.get("/v1/batches/{batch_id}")
async def retrieve_batch(request: Request, batch_id: str) -> Response:
    return present(await service(request).get_batch(batch_id, tenant_of(request)))


@router.post("/v1/batches/{batch_id}/cancel")
async def cancel_batch(request: Request, batch_id: str) -> Response:
    return present(await service(request).cancel_batch(batch_id, tenant_of(request)))
