"""sinks — see PRODUCT.md."""
