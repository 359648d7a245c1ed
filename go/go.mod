module ggmlrs

go 1.23
