// A memory in standard cells (deca.synth.cells): a register per word and, per read port, the
// address decoded one-hot, each word ANDed with its select and the words ORed. Yosys's memory_map
// builds a read as a binary multiplexer tree on the address bits instead, whose every level loads
// the address with the whole width; on a 64 x 16-bit sub-LUT of the ASAP7 PE the one-hot read is
// about half the logic and faster (deca.synth.cells.MEMORY_CELLS).
//
// Mapped: one write port on a rising edge, read ports on a rising edge or asynchronous, neither
// transparent nor reset. Any other memory is declined (_TECHMAP_FAIL_) and goes to memory_map.
// Word r of memory m is the net m.row[r].q (memory_map's m[r]): deca.synth.activity finds a
// replayed memory's rows by these names.
(* techmap_celltype = "$mem_v2" *)
module _deca_memory_cells (RD_CLK, RD_EN, RD_ARST, RD_SRST, RD_ADDR, RD_DATA, WR_CLK, WR_EN, WR_ADDR, WR_DATA);
	parameter MEMID = "";
	parameter SIZE = 4;
	parameter OFFSET = 0;
	parameter ABITS = 2;
	parameter WIDTH = 8;
	parameter INIT = 1'bx;
	parameter RD_PORTS = 1;
	parameter RD_CLK_ENABLE = 1'b1;
	parameter RD_CLK_POLARITY = 1'b1;
	parameter RD_TRANSPARENCY_MASK = 1'b0;
	parameter RD_COLLISION_X_MASK = 1'b0;
	parameter RD_WIDE_CONTINUATION = 1'b0;
	parameter RD_CE_OVER_SRST = 1'b0;
	parameter RD_ARST_VALUE = 1'b0;
	parameter RD_SRST_VALUE = 1'b0;
	parameter RD_INIT_VALUE = 1'b0;
	parameter WR_PORTS = 1;
	parameter WR_CLK_ENABLE = 1'b1;
	parameter WR_CLK_POLARITY = 1'b1;
	parameter WR_PRIORITY_MASK = 1'b0;
	parameter WR_WIDE_CONTINUATION = 1'b0;
	parameter _TECHMAP_CONSTMSK_RD_ARST_ = 0;
	parameter _TECHMAP_CONSTVAL_RD_ARST_ = 0;
	parameter _TECHMAP_CONSTMSK_RD_SRST_ = 0;
	parameter _TECHMAP_CONSTVAL_RD_SRST_ = 0;

	input [RD_PORTS-1:0] RD_CLK;
	input [RD_PORTS-1:0] RD_EN;
	input [RD_PORTS-1:0] RD_ARST;
	input [RD_PORTS-1:0] RD_SRST;
	input [RD_PORTS*ABITS-1:0] RD_ADDR;
	output [RD_PORTS*WIDTH-1:0] RD_DATA;
	input [WR_PORTS-1:0] WR_CLK;
	input [WR_PORTS*WIDTH-1:0] WR_EN;
	input [WR_PORTS*ABITS-1:0] WR_ADDR;
	input [WR_PORTS*WIDTH-1:0] WR_DATA;

	localparam RESETS = {RD_PORTS{1'b1}};
	wire _TECHMAP_FAIL_ = WR_PORTS != 1 || !WR_CLK_ENABLE[0] || !WR_CLK_POLARITY[0] || OFFSET != 0
		|| RD_TRANSPARENCY_MASK != 0 || RD_WIDE_CONTINUATION != 0 || WR_WIDE_CONTINUATION != 0
		|| (RD_CLK_ENABLE & ~RD_CLK_POLARITY) != 0
		|| _TECHMAP_CONSTMSK_RD_ARST_ != RESETS || _TECHMAP_CONSTVAL_RD_ARST_ != 0
		|| _TECHMAP_CONSTMSK_RD_SRST_ != RESETS || _TECHMAP_CONSTVAL_RD_SRST_ != 0;

	wire [SIZE*WIDTH-1:0] words;
	genvar r, b, p;
	generate
		for (r = 0; r < SIZE; r = r + 1) begin : row
			wire hit = WR_ADDR[ABITS-1:0] == r;
			wire [WIDTH-1:0] q;
			assign words[r*WIDTH +: WIDTH] = q;
			for (b = 0; b < WIDTH; b = b + 1) begin : bits
				// keep: the LUT replicas hold the same entries, and merged they would be one array.
				// deca_storage: deca.synth.cells maps these to the library's smallest flip-flop.
				(* keep, deca_storage *)
				\$dffe #(.WIDTH(1), .CLK_POLARITY(1'b1), .EN_POLARITY(1'b1)) ff (
					.CLK(WR_CLK[0]), .EN(WR_EN[b] & hit), .D(WR_DATA[b]), .Q(q[b]));
			end
		end
		for (p = 0; p < RD_PORTS; p = p + 1) begin : read
			wire [ABITS-1:0] addr = RD_ADDR[p*ABITS +: ABITS];
			wire [(SIZE+1)*WIDTH-1:0] sum;
			assign sum[WIDTH-1:0] = {WIDTH{1'b0}};
			for (r = 0; r < SIZE; r = r + 1) begin : term
				assign sum[(r+1)*WIDTH +: WIDTH] = sum[r*WIDTH +: WIDTH]
					| (words[r*WIDTH +: WIDTH] & {WIDTH{addr == r}});
			end
			if (RD_CLK_ENABLE[p]) begin : sync
				\$dffe #(.WIDTH(WIDTH), .CLK_POLARITY(1'b1), .EN_POLARITY(1'b1)) q (
					.CLK(RD_CLK[p]), .EN(RD_EN[p]), .D(sum[SIZE*WIDTH +: WIDTH]), .Q(RD_DATA[p*WIDTH +: WIDTH]));
			end else begin : async
				assign RD_DATA[p*WIDTH +: WIDTH] = sum[SIZE*WIDTH +: WIDTH];
			end
		end
	endgenerate
endmodule
