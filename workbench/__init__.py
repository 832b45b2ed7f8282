"""Memory Workbench app: Streamlit presentation over the `engine` library."""
