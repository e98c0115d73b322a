"""Reports of an estimate: its JSON document, the CLI's text, and the training snippet per stack."""
