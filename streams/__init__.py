"""streams — see PRODUCT.md."""
