"""Views: enqueue a Django task, read its result back, and queue a taskforge task on commit."""

from django.db import transaction
from django.http import HttpRequest, JsonResponse
from mysite.queue import send_receipt

from .tasks import thumbnail


def make_thumbnail(request: HttpRequest) -> JsonResponse:
    result = thumbnail.enqueue(request.GET.get("name", "cat.jpg"), int(request.GET.get("size", "64")))
    return JsonResponse({"id": result.id, "status": result.status})


def result(request: HttpRequest, result_id: str) -> JsonResponse:
    found = thumbnail.get_result(result_id)
    value = found.return_value if found.is_finished and not found.errors else None
    return JsonResponse({"id": found.id, "status": found.status, "return_value": value})


def place_order(request: HttpRequest) -> JsonResponse:
    order_id = int(request.GET.get("id", "1"))
    with transaction.atomic():
        # ... save the order here ...
        send_receipt.delay_on_commit(order_id)  # queued only if the transaction commits
    return JsonResponse({"order": order_id})
