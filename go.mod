module github.com/conclave-ai/conclave

go 1.26

require github.com/google/uuid v1.6.0
