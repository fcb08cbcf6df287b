//go:build !race

package openapi_test

// raceDetector says the tests run under the race detector.
const raceDetector = false
