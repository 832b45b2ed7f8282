"""The Annotate page's parts: annotation cases and team labels."""
