"""What each choice is: one table per option (methods, precisions, optimizers, losses, checkpointing, stacks,
trainers, devices), with stable ids. The estimate, the snippets, the CLI and the pages all read these entries;
none of them states a fact again. Pure data: no Streamlit, Plotly or torch."""
