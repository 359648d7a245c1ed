//! The ids and sizes of ggml's RPC protocol 7 (ggml-rpc.cpp), for the tests
//! that speak it by hand or relay it (tests/rpc.rs, rpc_server.rs,
//! rpc_client.rs).
#![allow(dead_code)]

pub const ALLOC_BUFFER: u8 = 0;
pub const GET_ALIGNMENT: u8 = 1;
pub const GET_MAX_SIZE: u8 = 2;
pub const BUFFER_GET_BASE: u8 = 3;
pub const FREE_BUFFER: u8 = 4;
pub const BUFFER_CLEAR: u8 = 5;
pub const SET_TENSOR: u8 = 6;
pub const SET_TENSOR_HASH: u8 = 7;
pub const GET_TENSOR: u8 = 8;
pub const COPY_TENSOR: u8 = 9;
pub const GRAPH_COMPUTE: u8 = 10;
pub const GET_DEVICE_MEMORY: u8 = 11;
pub const INIT_TENSOR: u8 = 12;
pub const GET_ALLOC_SIZE: u8 = 13;
pub const HELLO: u8 = 14;
pub const DEVICE_COUNT: u8 = 15;

/// The commands the server answers (the others have no reply).
pub const WITH_REPLY: [u8; 11] = [
    ALLOC_BUFFER, GET_ALIGNMENT, GET_MAX_SIZE, BUFFER_GET_BASE, SET_TENSOR_HASH, GET_TENSOR, COPY_TENSOR,
    GET_DEVICE_MEMORY, GET_ALLOC_SIZE, HELLO, DEVICE_COUNT,
];

/// The protocol's major version, and the size of HELLO's capabilities.
pub const MAJOR: u8 = 7;
pub const CAPS: usize = 24;
/// sizeof(rpc_tensor): id u64, type u32, buffer u64, ne u32[4],
/// nb u32[4], op u32, op_params i32[16], flags i32, src u64[10],
/// view_src u64, view_offs u64, data u64, name [u8; 64], use_count i32.
pub const TENSOR: usize = 296;
