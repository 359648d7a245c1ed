#version 450
// Uses binding 0 only; the set layout also has binding 1, which it ignores.
layout(local_size_x = 1) in;
layout(binding = 0) buffer A { uint a[]; };
void main() { a[0] += 1u; }
