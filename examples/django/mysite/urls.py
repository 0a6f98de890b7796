from django.urls import path
from shop import views

urlpatterns = [
    path("thumbnails/", views.make_thumbnail),
    path("results/<str:result_id>/", views.result),
    path("orders/", views.place_order),
]
