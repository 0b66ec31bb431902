"""``prism serve``: a local web inspector and approval inbox over the user's store."""
