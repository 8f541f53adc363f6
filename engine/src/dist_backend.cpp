// placeholder: the object algorithms (owned by the backends work)
