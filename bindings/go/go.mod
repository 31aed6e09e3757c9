module github.com/snowid/snowid/bindings/go

go 1.19
