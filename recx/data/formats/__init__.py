"""Source formats for `recx prepare --format NAME`, found by name in `FORMATS`."""

from recx.core.registry import Registry

FORMATS: Registry = Registry("format")

from recx.data.formats import (  # noqa: E402,F401  (registration)
    amazon,
    gowalla_checkins,
    lightgcn,
    mat,
    movielens,
    netflix,
    synthetic,
    triplets,
    yelp,
)
