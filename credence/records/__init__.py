"""The records on credence's topics, one module per record: its frozen, versioned type and its decode/encode."""
