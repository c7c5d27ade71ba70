"""One module per API family; each starts with the versions it serves and what differs."""
