package main

// Every model provider registers itself with model.Open by import.
import _ "github.com/quiverhq/quiver/model/all"
