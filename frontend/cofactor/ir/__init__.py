"""IR construction: xDSL builders, the MLIR 15 spelling table, the quantum dialect's generic ops."""
