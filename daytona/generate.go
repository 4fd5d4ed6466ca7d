package daytona

// The fidelity tests check the route table and DTOs against facts derived
// from the Daytona OpenAPI documents, committed in testdata so that a clone
// needs no copy of the documents. To refresh them for a new release:
//
//	DAYTONA_OPENAPI_DIR=/path/to/daytona-api go generate ./daytona
//
//go:generate go run ./internal/openapifacts/genfacts -out testdata/openapi-facts.txt
