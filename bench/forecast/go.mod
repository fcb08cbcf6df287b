module github.com/quiverhq/quiver/bench/forecast

go 1.26.8
